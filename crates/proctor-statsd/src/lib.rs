//! statsd parser, aggregator and server (issue #4): not implemented yet.
