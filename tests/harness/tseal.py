"""A history file's chunks, read from Python without torchseal's reader
(docs/tseal-format.md), for checks that must not trust it: the chunk walk
and LEB128 varints."""

import struct

FILE_HEADER, CHUNK_HEADER = 16, 12


def varint(data, pos):
    """The unsigned LEB128 value at data[pos:] and the position after it."""
    v = shift = 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, pos


def chunks(data):
    """(type, payload) of each chunk of a history file's bytes, in order."""
    off = FILE_HEADER
    while off + CHUNK_HEADER <= len(data):
        typ, _, _, _, ln, _crc = struct.unpack_from("<BBBBII", data, off)
        yield typ, data[off + CHUNK_HEADER: off + CHUNK_HEADER + ln]
        off += CHUNK_HEADER + ln
