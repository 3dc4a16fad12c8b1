"""Settings: the schema and its layered TOML files (``settings``), where caliban keeps its
files (``paths``), and editing TOML in place (``toml_edit``)."""
