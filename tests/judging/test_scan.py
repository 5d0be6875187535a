"""What marks source as reading or steering the harness, and what does not."""

from __future__ import annotations

import pytest

from snodo.judging.scan import added_findings

STEERING = [
    "import pytest\n",
    "from _pytest import runner\n",
    "import os\nif os.environ.get('PYTEST_CURRENT_TEST'):\n    pass\n",
    "import os\nx = os.getenv('CI')\n",
    "import os\nx = 'PYTEST_CURRENT_TEST' in os.environ\n",
    "import sys\nx = 'pytest' in sys.modules\n",
    "import sys\nsys.exit = lambda *a: None\n",
    "import os\nos._exit(0)\n",
    "import atexit\natexit.register(print)\n",
    "import signal\nsignal.signal(signal.SIGTERM, print)\n",
    "import builtins\nbuiltins.len = lambda x: 0\n",
    "import sys\nf = sys._getframe(1)\n",
    "x = __import__('py' + 'test')\n",
    "x = __import__('_pytest')\n",
]


@pytest.mark.parametrize("source", STEERING)
def test_steering_source_is_found(source: str) -> None:
    assert added_findings(source.encode(), None), source


@pytest.mark.parametrize(
    "source",
    ["def add(a, b):\n    return a + b\n", "import os\npath = os.environ.get('HOME')\n", "import sys\nsys.exit(2)\n"],
)
def test_ordinary_source_is_not(source: str) -> None:
    assert added_findings(source.encode(), None) == []


def test_only_what_the_change_added_counts() -> None:
    old = b"import os\nos._exit(3)\n"
    assert added_findings(b"import os\n\nos._exit(3)\nx = 1\n", old) == []
    assert added_findings(b"import os\nos._exit(3)\nos._exit(0)\n", old) == [
        "line 3: os._exit() ends the process without reporting: os._exit(0)"
    ]
