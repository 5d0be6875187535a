from snodo.cli.main import main

main()
