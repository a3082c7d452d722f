"""Random number generators whose streams must match other programs' bit for bit (A1111's "NV" noise)."""

from mixkit.random.philox import PhiloxGenerator, philox4x32_10, philox_normal

__all__ = ["PhiloxGenerator", "philox4x32_10", "philox_normal"]
