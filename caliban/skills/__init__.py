"""Custom slash commands and skills (Claude Code's formats): the catalog
(:mod:`~caliban.skills.catalog`), expanding a command into a prompt
(:mod:`~caliban.skills.expand`, :mod:`~caliban.skills.invoke`) and the lazily loaded skills
the model sees (:mod:`~caliban.skills.toolset`)."""
