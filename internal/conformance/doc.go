// Package conformance holds the test that keeps CONFORMANCE.md, the map from
// the project's published conformance statements (H1–H22, S1–S13, T1–T6,
// D1–D4, CK1–CK8, SD1–SD8) to the tests that pin them, honest: every
// statement has at least one test entry, and every entry names a test that
// exists. The package has no code of its own.
package conformance
