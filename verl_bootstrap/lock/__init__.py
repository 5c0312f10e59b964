"""The lock capability: one format for the env's own record and for the lab's shared,
hash-checked locks (format, io, fit, gaps, diff), choosing the lock a run takes (lockroute),
finding its files on the indexes (lookup, wheelrank), making and checking locks (making/),
installing exactly one (installing/), comparing an env with one (drift), and carrying one
elsewhere (export/, bundle/). Its face imports nothing: a command's module that names one of its
parts (export's formats) must not load the format's models with `--help`."""
