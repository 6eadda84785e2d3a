package sqlitestore_test

import (
	"testing"

	"github.com/idemgo/idem/idemtest"
)

// TestBatchAnswersEachCallerItsOwn: a thousand callers at once through a
// store with Config.Batch each get their own answers (idemtest.Crowd),
// and a caller whose deadline ended first left nothing behind: its key is
// Fresh again.
func TestBatchAnswersEachCallerItsOwn(t *testing.T) {
	db, _ := newDB(t, 4)
	idemtest.Crowd(t, newStoreBatch(t, db, nil, true), idemtest.CrowdOpts{Leave: true})
}
