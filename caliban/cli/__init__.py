"""The ``caliban`` command line: the top-level command and its subcommands."""
