package main

// notMigrated is an error saying that a store's schema is not there: no
// SQLite database, no table. idem migrate creates it, and so does idem
// proxy unless --migrate=false.
type notMigrated struct{ error }

func (e notMigrated) Unwrap() error { return e.error }
