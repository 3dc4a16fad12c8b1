"""A stand-in browser for the login tests: ``browser.py URL`` follows the redirects from the
authorization URL to caliban's callback, as a browser whose user says yes would."""

import sys
import urllib.request

# The hang guard (tests/hang.py HANG_S): caliban answers the callback when a busy machine lets it.
with urllib.request.urlopen(sys.argv[1], timeout=300) as page:  # follows redirects
    page.read()
