// build output, ignored
