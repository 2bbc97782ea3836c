//! strace log parser and analyzer (issue #6): not implemented yet.
