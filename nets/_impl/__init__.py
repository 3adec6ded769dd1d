"""Building blocks shared by the official-path modules of ``nets``; not part of the official API."""
