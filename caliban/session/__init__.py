"""A session and its transcripts: the one mutable owner of a conversation, how it is
assembled, what fills its context, and how it is saved and resumed."""
