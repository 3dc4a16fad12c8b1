"""Model providers. Import the concrete ones lazily (through ``select.create_provider``)."""
