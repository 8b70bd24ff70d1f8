"""Lambda handlers: one thin module per function, over the shared `grandbo` layer."""
