package memstore

// SetCompactSlack sets how many items beyond twice the records the expiry
// heap may hold before it is compacted, and returns a function that
// puts the default back.
func SetCompactSlack(n int) (restore func()) {
	old := compactSlack
	compactSlack = n
	return func() { compactSlack = old }
}
