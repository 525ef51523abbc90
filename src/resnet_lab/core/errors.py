"""The one exception type that means "the user asked for something we cannot do"."""


class UsageError(ValueError):
    """Bad input: the message is one line saying what was wrong and what is allowed.

    The CLI prints it as ``resnet-lab: error: <message>`` and exits with status 2. Raise it before any
    heavy work (TensorFlow import, compilation) and before anything is written.
    """
