"""The warning a fit gives when something it publishes was read from the private data."""

from __future__ import annotations


class PrivacyLeakWarning(RuntimeWarning):
    """A fit read a structural output from the private data instead of the declared public
    schema, so the privacy guarantee does not cover it (diffprivlib's convention). Example:
    ``DecentralizedGroupLassoLogistic(epsilon=1.0, classes=None)`` reads the two label values
    from ``y``; ``classes=(negative, positive)`` declares them and avoids the warning."""
