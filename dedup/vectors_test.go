package dedup

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// vectorFiles are the shared test vectors this package's tests check, as
// copied into testdata/.
var vectorFiles = []string{"dedup_key_vectors.json", "blake3_official_test_vectors.json"}

// TestVectorCopiesAreTheSharedOnes: the copies in testdata/ are byte for
// byte the project's shared vectors (../shared/vectors from the repository
// root), so the tests that read the copies check every shared vector. It
// is skipped where the shared directory is not beside the repository.
func TestVectorCopiesAreTheSharedOnes(t *testing.T) {
	t.Parallel()
	shared := filepath.Join("..", "..", "shared", "vectors")
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("no shared vectors at %s: %v", shared, err)
	}
	for _, name := range vectorFiles {
		want, err := os.ReadFile(filepath.Join(shared, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/%s differs from %s", name, filepath.Join(shared, name))
		}
	}
}

// TestVectorFilesHoldNothingUnchecked: every case of the vector files has
// exactly the fields the vector tests read, so no vector (a mode, an
// output) is silently skipped, and no case was lost from the copies.
func TestVectorFilesHoldNothingUnchecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file   string
		top    []string
		fields [][]string // the allowed key sets of a case
		cases  int
	}{
		{
			file: "dedup_key_vectors.json",
			top:  []string{"cases", "description"},
			fields: [][]string{
				{"digest_hex", "key_hex", "key_u128_le_decimal", "op_hex", "seqno", "session_id_hex"},
				{"digest_hex", "key_hex", "key_u128_le_decimal", "op_repeat", "seqno", "session_id_hex"},
			},
			cases: 60,
		},
		{
			file:   "blake3_official_test_vectors.json",
			top:    []string{"_comment", "cases", "context_string", "key"},
			fields: [][]string{{"derive_key", "hash", "input_len", "keyed_hash"}},
			cases:  35,
		},
	} {
		var doc map[string]json.RawMessage
		loadJSON(t, filepath.Join("testdata", tc.file), &doc)
		if got := sortedKeys(doc); !slices.Equal(got, tc.top) {
			t.Errorf("%s: top-level fields %v, the tests read %v", tc.file, got, tc.top)
		}
		var cases []map[string]json.RawMessage
		if err := json.Unmarshal(doc["cases"], &cases); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if len(cases) != tc.cases {
			t.Errorf("%s: %d cases, want %d", tc.file, len(cases), tc.cases)
		}
		for i, c := range cases {
			got := sortedKeys(c)
			if !slices.ContainsFunc(tc.fields, func(f []string) bool { return slices.Equal(f, got) }) {
				t.Errorf("%s case %d: fields %v, the tests read one of %v", tc.file, i, got, tc.fields)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
