from caliban.cli.main import main

main()
