"""The HTTP surface: request models, signatures and tokens, the error mapping, the nonce
store of signed requests, and the Python clients."""
