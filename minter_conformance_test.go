package idem_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// s12Child, set in the environment, makes TestS12MinterSameKeyInAnotherProcess
// the child process: it mints the key of every published vector and prints
// each as a "key <value>" line.
const s12Child = "IDEM_S12_MINT_CHILD"

type minterVector struct {
	Namespace string   `json:"namespace"`
	Parts     []string `json:"parts"`
	Key       string   `json:"key"`
}

func minterVectors(t *testing.T) []minterVector {
	t.Helper()
	raw, err := os.ReadFile("testdata/minter_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []minterVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return file.Vectors
}

func mintVector(t *testing.T, v minterVector) string {
	t.Helper()
	m, err := idem.NewMinter(idem.MustNamespace(v.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Mint(v.Parts...)
	if err != nil {
		t.Fatalf("Mint(%s, %q): %v", v.Namespace, v.Parts, err)
	}
	return k.Value()
}

// TestS12MinterSameKeyInAnotherProcess pins the "across processes" half of
// S12: a second process (this test binary run again) mints, for the same
// parts, the keys this process mints and the published vectors list.
func TestS12MinterSameKeyInAnotherProcess(t *testing.T) {
	vectors := minterVectors(t)
	if os.Getenv(s12Child) == "1" {
		for _, v := range vectors {
			fmt.Println("key " + mintVector(t, v))
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestS12MinterSameKeyInAnotherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), s12Child+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child process: %v\n%s%s", err, out, stderr.Bytes())
	}
	var child []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "key "); ok {
			child = append(child, v)
		}
	}
	if len(child) != len(vectors) {
		t.Fatalf("child printed %d keys, want %d:\n%s", len(child), len(vectors), out)
	}
	for i, v := range vectors {
		here := mintVector(t, v)
		if child[i] != here || here != v.Key {
			t.Errorf("Mint(%s, %q): this process %s, other process %s, published %s", v.Namespace, v.Parts, here, child[i], v.Key)
		}
	}
}
