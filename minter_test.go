package idem_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/idemgo/idem"
)

// TestMinterVectors pins the minted keys to the published vectors, which
// were computed independently of this code (see testdata/minter_vectors.json).
func TestMinterVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/minter_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Namespace string   `json:"namespace"`
			Parts     []string `json:"parts"`
			Key       string   `json:"key"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range file.Vectors {
		m, err := idem.NewMinter(idem.MustNamespace(v.Namespace))
		if err != nil {
			t.Fatal(err)
		}
		k, err := m.Mint(v.Parts...)
		if err != nil {
			t.Fatalf("Mint(%q): %v", v.Parts, err)
		}
		if k.Value() != v.Key || k.Namespace() != m.Namespace() {
			t.Errorf("Mint(%s, %q) = %s, want %s", v.Namespace, v.Parts, k.Value(), v.Key)
		}
		if len(k.Value()) > idem.MaxKeyLen {
			t.Errorf("minted key is %d bytes", len(k.Value()))
		}
		for i := 0; i < len(k.Value()); i++ {
			if c := k.Value()[i]; c < 0x21 || c > 0x7e {
				t.Errorf("minted key has non-printable byte %q", c)
			}
		}
		// A minted key survives the header round trip (it is what a
		// downstream API will receive).
		if p, err := idem.ParseKey(m.Namespace(), k.Value()); err != nil || p != k {
			t.Errorf("minted key does not parse back: %v", err)
		}
	}
}

func TestMinterDistinguishes(t *testing.T) {
	a, _ := idem.NewMinter(idem.MustNamespace("email-job"))
	b, _ := idem.NewMinter(idem.MustNamespace("billing"))
	mint := func(m *idem.Minter, parts ...string) string {
		t.Helper()
		k, err := m.Mint(parts...)
		if err != nil {
			t.Fatal(err)
		}
		return k.Value()
	}
	if mint(a, "ab", "c") == mint(a, "a", "bc") {
		t.Error(`["ab","c"] and ["a","bc"] mint the same key`)
	}
	if mint(a, "x") == mint(b, "x") {
		t.Error("another namespace mints the same key")
	}
	if mint(a, "x", "y") == mint(a, "y", "x") {
		t.Error("part order does not matter")
	}
	first, again := mint(a, "x"), mint(a, "x")
	if first != again {
		t.Error("the same parts mint different keys")
	}
}

func TestMinterRejects(t *testing.T) {
	m, _ := idem.NewMinter(idem.MustNamespace("email-job"))
	for name, parts := range map[string][]string{
		"no parts":     nil,
		"empty part":   {"a", ""},
		"blank part":   {" \t\n"},
		"invalid utf8": {"a\xff"},
	} {
		if _, err := m.Mint(parts...); !errors.Is(err, idem.ErrInvalidParts) {
			t.Errorf("%s: Mint = %v, want ErrInvalidParts", name, err)
		}
	}
	var zero idem.Minter
	if k, err := zero.Mint("a"); !errors.Is(err, idem.ErrInvalidNamespace) {
		t.Errorf("the zero Minter's Mint = %v, %v; want ErrInvalidNamespace", k, err)
	}
	if _, err := idem.NewMinter(idem.Namespace("")); !errors.Is(err, idem.ErrInvalidNamespace) {
		t.Errorf("NewMinter(\"\") = %v, want ErrInvalidNamespace", err)
	}
}
