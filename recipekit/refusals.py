"""How a recipe says no: the two refusals the server passes on to the reader, by type.

    raise Refused("input_ids: a token past the vocabulary")    # the request is wrong: its message starts with the field
    raise Unavailable("the checkpoint folder does not exist")  # the server cannot serve any request now

Any other exception is a failed run (the server logs it and says where it stopped). Imports nothing else.
"""


class Refused(ValueError):
    """The request cannot be run as asked: the message starts with the field at fault (`input_ids: ...`)."""


class Unavailable(RuntimeError):
    """The recipe cannot serve any request now (a checkpoint it reads is missing or unusable): not the request's
    fault."""
