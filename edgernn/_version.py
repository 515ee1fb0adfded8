"""The version of edgernn, in a leaf module that every stage may import."""

__version__ = "0.1.0"
