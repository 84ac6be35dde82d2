"""Zip archives made in memory for the download tests, including ones whose headers lie."""

import io
import struct
import zipfile

# (signature, offsets of the uncompressed size, the name's length and the name) of the two
# headers each member has: the local one before its data and the central directory's.
_HEADERS = ((b"PK\x03\x04", 22, 26, 30), (b"PK\x01\x02", 24, 28, 46))


def zip_bytes(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    """A zip archive of `members` (name -> content)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def declaring(archive: bytes, name: str, size: int) -> bytes:
    """`archive` with member `name`'s uncompressed size set to `size` in both its headers."""
    patched, encoded = bytearray(archive), name.encode()
    for signature, size_at, length_at, name_at in _HEADERS:
        start = patched.find(signature)
        while start >= 0:
            length = struct.unpack_from("<H", patched, start + length_at)[0]
            if patched[start + name_at:start + name_at + length] == encoded:
                struct.pack_into("<I", patched, start + size_at, size)
            start = patched.find(signature, start + 4)
    return bytes(patched)
