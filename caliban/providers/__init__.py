"""Model providers. Import the concrete ones lazily: their SDKs take seconds to import."""
