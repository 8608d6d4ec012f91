// The dashboard is built by issue 4.
