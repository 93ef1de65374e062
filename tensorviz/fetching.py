"""What the reader's verifier takes from a server: from the server's own origin alone, each answer bounded in size,
everything within one deadline, and read as data (JSON, safetensors, SVG), never unpickled nor imported.

Nothing here trusts what the server says of itself beyond the hashes its manifest records; a malformed answer is a
Refused with a sentence, never a traceback."""

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

CHUNK = 1 << 16  # bytes read at a time, the deadline looked at between reads
MANIFEST_BYTES = 64 * 2**20  # the most a JSON answer may hold (the largest manifest is under 2 MiB)


class Refused(Exception):
    """The check could not be made: the message says what and why (exit status 2)."""


@dataclass
class Server:
    """One server, asked within one deadline (time.monotonic()), each file at most `max_bytes`."""

    base: str
    deadline: float
    max_bytes: int

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise Refused("the check ran past its deadline (--timeout) and was stopped")
        return left

    def url(self, path: str) -> str:
        """`path` (a manifest's file URL) on this server; Refused for one on another origin or scheme."""
        joined = urllib.parse.urljoin(self.base + "/", path)
        ours, theirs = urllib.parse.urlsplit(self.base), urllib.parse.urlsplit(joined)
        if (theirs.scheme, theirs.netloc) != (ours.scheme, ours.netloc):
            raise Refused(f"{path!r} is not on the server checked ({ours.scheme}://{ours.netloc}): refused, nothing "
                          "was fetched from elsewhere")
        return joined

    def get(self, url: str, body: dict | None = None, most: int | None = None) -> bytes:
        """The body at `url` (POSTing `body` as JSON where given), at most `most` bytes (max_bytes by default);
        Refused with the server's own message where it answers an error."""
        most = self.max_bytes if most is None else most
        headers = {"Accept": "application/json, */*", "User-Agent": "tensorviz-verify"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=min(60.0, self.remaining())) as answer:
                declared = answer.headers.get("Content-Length")
                if declared and declared.isdigit() and int(declared) > most:
                    raise Refused(f"{url} would send {int(declared):,} bytes, more than the {most:,} allowed "
                                  "(--max-bytes)")
                received = bytearray()
                while chunk := answer.read1(CHUNK):  # what has come, not a whole chunk: the deadline is looked at
                    received += chunk
                    if len(received) > most:
                        raise Refused(f"{url} sent more than the {most:,} bytes allowed (--max-bytes)")
                    self.remaining()  # a server that drips bytes is stopped at the deadline
                return bytes(received)
        except urllib.error.HTTPError as exc:
            try:
                said = json.loads(exc.read(CHUNK))["error"]["message"]
            except (ValueError, KeyError, TypeError, RecursionError):
                said = exc.reason
            raise Refused(f"{url} answered {exc.code}: {said}") from None
        except (urllib.error.URLError, OSError) as exc:
            if time.monotonic() >= self.deadline:
                raise Refused("the check ran past its deadline (--timeout) and was stopped") from None
            raise Refused(f"{url} cannot be reached: {getattr(exc, 'reason', exc)}") from None

    def json(self, url: str, body: dict | None = None) -> object:
        """A JSON answer; Refused for one that is not JSON (or nests past what Python can read)."""
        raw = self.get(url, body, MANIFEST_BYTES)
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise Refused(f"{url} did not answer readable JSON ({type(exc).__name__})") from None
