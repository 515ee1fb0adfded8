"""Stage 4, the link: the serial link between edgernn and a device running the validation server."""

from edgernn.link.client import LinkClient, RunResult, open_port

__all__ = ["LinkClient", "RunResult", "open_port"]
