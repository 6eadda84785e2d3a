package pgstorable

import (
	"strings"
	"testing"
)

func TestJSONB(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a":"b"}`:             "",
		`"a\\u0000"`:            "", // an escaped backslash, then the text u0000
		`"\u00e9\n\"\\"`:        "",
		`"\ud83d\ude00"`:        "", // a pair
		`"a\u0000b"`:            `\u0000`,
		`["\ud800"]`:            "lone high",
		`"\ud800\u0041"`:        "lone high",
		`"\udc00"`:              "lone low",
		`{"\u0000":1}`:          `\u0000`,
		`"\\\u0000"`:            `\u0000`, // an escaped backslash, then the escape
		`"\ud800\\u0041"`:       "lone high",
		`"truncated\ud800"`:     "lone high",
		`"escaped quote \" ok"`: "",
	} {
		err := JSONB([]byte(doc))
		switch {
		case want == "" && err != nil:
			t.Errorf("JSONB(%s) = %v, want nil", doc, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("JSONB(%s) = %v, want an error naming %q", doc, err, want)
		}
	}
}

func TestText(t *testing.T) {
	for s, ok := range map[string]bool{"": true, "clé": true, "a\x00b": false, "a\xffb": false} {
		if err := Text(s); (err == nil) != ok {
			t.Errorf("Text(%q) = %v", s, err)
		}
		c := CleanText(s)
		if Text(c) != nil || (ok && c != s) {
			t.Errorf("CleanText(%q) = %q", s, c)
		}
	}
	if got := CleanText("a\x00b\xff\xfec"); got != "a\uFFFDb\uFFFD\uFFFDc" {
		t.Errorf("CleanText = %q", got)
	}
}
