#!/usr/bin/env bash
# snodo's merge gate in CI: every commit of BASE..HEAD carries an attestation of a governed run
# or a person's signature that the base's .snodo/allowed_signers trusts (docs/ci.md).
#
#   SNODO_BASE   the base commit or ref (a pull request's base); required
#   SNODO_HEAD   the head commit or ref (default: HEAD)
#   SNODO_REMOTE where commits and attestations are fetched from (default: origin)
#   SNODO        the snodo command (default: snodo)
#
# Exit status is snodo verify's: 0 every commit passes, 1 some do not, 4 the check could not
# run (no such range, no allowed_signers at the base).
set -euo pipefail

base=${SNODO_BASE:?set SNODO_BASE to the base commit or ref of the change}
head=${SNODO_HEAD:-HEAD}
remote=${SNODO_REMOTE:-origin}
read -r -a snodo <<<"${SNODO:-snodo}"

# A shallow checkout (actions/checkout's default) lacks the commits between base and head.
if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  git fetch --quiet --no-tags --unshallow "$remote"
fi
for rev in "$base" "$head"; do
  if ! git cat-file -e "$rev^{commit}" 2>/dev/null; then
    git fetch --quiet --no-tags "$remote" "$rev"
  fi
done
# Attestations travel on their own ref, which no checkout fetches.
if git ls-remote --exit-code "$remote" refs/notes/snodo >/dev/null; then
  git fetch --quiet --no-tags --force "$remote" 'refs/notes/snodo:refs/notes/snodo'
else
  echo "note: $remote has no refs/notes/snodo: only commits signed by a person can pass" >&2
fi

base_commit=$(git rev-parse --verify "$base^{commit}")
head_commit=$(git rev-parse --verify "$head^{commit}")
exec "${snodo[@]}" verify "$base_commit..$head_commit"
