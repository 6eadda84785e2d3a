package canonjson_test

import (
	"errors"
	"fmt"

	"github.com/idemgo/idem/internal/canonjson"
)

func ExampleCanonicalize() {
	out, err := canonjson.Canonicalize([]byte(`{
		"b": [3, 1.50, "\u00e9"],
		"a": {"z": null, "y": 1e21}
	}`), canonjson.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	// Output: {"a":{"y":1e+21,"z":null},"b":[3,1.5,"é"]}
}

func ExampleCanonicalize_duplicateName() {
	_, err := canonjson.Canonicalize([]byte(`{"a":1,"\u0061":2}`), canonjson.Limits{})
	fmt.Println(errors.Is(err, canonjson.ErrDuplicateName))
	var e *canonjson.Error
	if errors.As(err, &e) {
		fmt.Println(e.Offset)
	}
	fmt.Println(err)
	// Output:
	// true
	// 7
	// canonjson: duplicate object member name "a" at offset 7
}

func ExampleAppendCanonical() {
	buf := []byte("fingerprint-input:")
	buf, err := canonjson.AppendCanonical(buf, []byte(` [ 1.0 , {"b":true,"a":false} ] `), canonjson.Limits{MaxDepth: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(buf))
	// Output: fingerprint-input:[1,{"a":false,"b":true}]
}
