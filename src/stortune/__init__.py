"""stortune: find out how a storage system's parameters shape its performance, and set them well."""

__version__ = "0.1.0"
