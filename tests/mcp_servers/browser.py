"""A stand-in browser for the login tests: ``browser.py URL`` follows the redirects from the
authorization URL to caliban's callback, as a browser whose user says yes would."""

import sys
import urllib.request

with urllib.request.urlopen(sys.argv[1], timeout=20) as page:  # follows redirects
    page.read()
