"""A store's error as one short true line: the S3 error code and message ("NoSuchBucket: The
specified bucket does not exist") where the error carries them, never a body cut in the middle.
botocore's ClientError keeps them parsed (``e.response["Error"]``, botocore/exceptions.py); s3fs
raises its own OSError from one (s3fs/errors.py translate_boto_error, the ClientError its
__cause__); s3torchconnector's S3Exception carries only text, the service's XML error body inside
a Rust Debug string (``error_response_body: Some("<?xml ...<Code>...</Code><Message>...")``,
mountpoint-s3-client's S3RequestError). The S3 error body's elements: Amazon S3 API Reference,
"Error responses"."""
from __future__ import annotations

import html
import re
from typing import Optional

_CODE = re.compile(r"<Code>(.*?)</Code>", re.S)
_MESSAGE = re.compile(r"<Message>(.*?)</Message>", re.S)


def _chain(e: BaseException) -> list[BaseException]:
    """`e` and the errors it was raised from or during, outermost first, each once."""
    out: list[BaseException] = []
    while e is not None and all(e is not seen for seen in out):
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def code_and_message(e: BaseException) -> Optional[str]:
    """"Code: Message" of the first error of `e`'s chain that carries an S3 error (botocore's
    parsed response, or an XML error body in its text); None when none does."""
    for err in _chain(e):
        error = getattr(err, "response", None)
        error = error.get("Error") if isinstance(error, dict) else None
        if isinstance(error, dict) and error.get("Code"):
            return f"{error['Code']}: {error.get('Message', '')}".rstrip(": ")
        text = str(err)
        code = _CODE.search(text)
        if code:
            message = _MESSAGE.search(text)
            found = html.unescape(code.group(1)).strip()
            return f"{found}: {html.unescape(message.group(1)).strip()}" if message else found
    return None


def describe(e: BaseException) -> str:
    """`e` as one line: "Type: Code: Message" where a store's error in its chain says them, else
    "Type: text" with the text's whitespace folded, in full."""
    found = code_and_message(e)
    return f"{type(e).__name__}: {found if found else ' '.join(str(e).split())}"
