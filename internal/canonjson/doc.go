// Package canonjson implements the JSON Canonicalization Scheme (JCS) of
// RFC 8785: it rewrites a JSON text into a unique byte sequence, so that two
// texts that describe the same data compare equal byte for byte and can be
// hashed or signed.
//
// The canonical form produced by [Canonicalize] and [AppendCanonical] has no
// insignificant whitespace; object members are sorted by the UTF-16 code
// units of their unescaped names; array elements keep their order; strings
// use the minimal escaping of RFC 8785 section 3.2.2.2 (\" \\ \b \f \n \r \t,
// other characters below U+0020 as \u00xx with lowercase hex, everything
// else as literal UTF-8); the literals are true, false and null; numbers are
// parsed as IEEE-754 binary64 values and written the way ECMAScript's
// Number.prototype.toString writes them (shortest round-trip digits, no
// exponent for integers below 1e21, -0 written as 0, exponents such as 1e+21
// and 1.5e-7).
//
// The input must be strict RFC 8259 JSON that also obeys the I-JSON rules
// RFC 8785 relies on:
//
//   - it is valid UTF-8 and does not start with a byte order mark;
//   - no object has two members with the same name, compared after
//     unescaping;
//   - no \u escape leaves a lone UTF-16 surrogate;
//   - every number is a finite binary64 value (numbers that overflow are
//     rejected; numbers that underflow become 0, as in ECMAScript);
//   - nothing but whitespace follows the top-level value.
//
// Input size and nesting depth are bounded by [Limits]. The input is read
// in a single pass that writes the output as it goes; members of objects
// that arrive out of order are moved into place by one more pass over the
// output, so every byte is moved at most once however deeply such objects
// nest. Nesting is tracked on explicit stacks: nothing recurses, and
// no input makes the package panic. With a warm internal pool,
// [AppendCanonical] into a buffer with room to spare does not allocate.
//
// Every failure is reported as an [*Error] holding the byte offset in the
// input and one of the sentinel errors ([ErrSyntax], [ErrDuplicateName],
// [ErrInvalidUTF8], [ErrLoneSurrogate], [ErrNumberRange], [ErrTooDeep],
// [ErrTooLarge]), to be tested with [errors.Is]. When an input has several
// faults, the size limit is checked first, then UTF-8 validity of the whole
// input, then everything else in input order, except that duplicate names
// are detected when their object closes.
package canonjson
