"""The interactive terminal UI: a prompt-toolkit prompt (``app``), slash commands
(``commands``) and a rich renderer of agent events (``render``).

Only imported when ``caliban`` runs interactively; nothing here is needed for ``-p``.
"""
