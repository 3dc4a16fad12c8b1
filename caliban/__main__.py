from caliban.cli import main

main()
