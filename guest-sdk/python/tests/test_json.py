"""Record.json(): the accept/reject rule of every shardhost SDK (guest-sdk/JSON.md). The Rust
SDK's `Record::json` answers the same for each verdict below (its own tests check the same
categories), and so does the JavaScript SDK's `record.json()`."""

import math
import unittest

from shardhost import DecodeError, Record, _json

OK, ERR, UTF8 = "ok", "json", "utf8"

LONG = [
    (b"17976931348623157" + b"0" * 292, OK),  # the largest double, written out
    (b"17976931348623159" + b"0" * 292, ERR),  # rounds to infinity
    (b"1" + b"0" * 308, OK),
    (b"9" * 309, ERR),
    (b"0." + b"0" * 400 + b"1e400", OK),
    (b"1" * 5000, ERR),
    (b"[" * 128 + b"]" * 128, OK),
    (b"[" * 129 + b"]" * 129, ERR),
    (b'{"a":' * 128 + b"1" + b"}" * 128, OK),
    (b'{"a":' * 129 + b"1" + b"}" * 129, ERR),
    (b'["' + b"[" * 300 + b'"]', OK),  # brackets inside a string do not nest
]

CASES = [
    (b'{"id":1,"address":"a","carrier":"dhl"}', OK),
    (b'  {"a" : [1, 2.5, "x", true, false, null]} \r\n\t', OK),
    (b"", ERR), (b" ", ERR),
    (b"\xef\xbb\xbf{}", ERR),  # a byte order mark is not whitespace
    (b"{} x", ERR), (b"{}{}", ERR), (b"1 2", ERR), (b"{}\x0c", ERR), (b"\x0c{}", ERR),
    (b"{}\x00", ERR), ("\u00a0{}".encode(), ERR), ("{}\u2028".encode(), ERR),
    (b"NaN", ERR), (b"Infinity", ERR), (b"-Infinity", ERR), (b"[NaN]", ERR),
    (b'{"x":Infinity}', ERR), (b"nan", ERR), (b"inf", ERR),
    (b"[1,]", ERR), (b'{"a":1,}', ERR), (b"[01]", ERR), (b"[1.]", ERR), (b"[.5]", ERR),
    (b"[+1]", ERR), (b"[-]", ERR), (b"[1e]", ERR), (b"[0x10]", ERR), (b"[1_000]", ERR),
    (b"{'a':1}", ERR), (b"{a:1}", ERR), (b"/*c*/{}", ERR), (b"{}//c", ERR),
    (b'["\\x"]', ERR), (b'["\\u00zz"]', ERR), (b'["\\u0041"]', OK), (b'["a\x01"]', ERR),
    (b'["a\x7f"]', OK), (b'["tab\tin"]', ERR),
    (b'["\\ud800"]', ERR), (b'["\\udc00"]', ERR), (b'["\\ud800\\u0041"]', ERR),
    (b'["\\ud83d\\ude00"]', OK), (b'["\\ud800\\ud800"]', ERR), (b'{"\\ud800":1}', ERR),
    (b'["\\\\ud800"]', OK),
    (b"-0", OK), (b"-0.0", OK), (b"0", OK), (b"-1", OK), (b"1e400", ERR), (b"-1e400", ERR),
    (b"1e-400", OK), (b"1e308", OK), (b"1.7976931348623157e308", OK),
    (b"1.7976931348623158e308", OK), (b"-1.7976931348623158e308", OK),
    (b"1.7976931348623159e308", ERR), (b"-1.7976931348623159e308", ERR),
    (b"18446744073709551615", OK), (b"18446744073709551616", OK),
    (b"-9223372036854775808", OK), (b"-9223372036854775809", OK),
    (b"0e99999999999", OK), (b"1e99999999999", ERR), (b"1e-99999999999", OK),
    (b'[{"a":1},{"a":2}]', OK),
    (b'"\xc3\x28"', UTF8), (b'"\xed\xa0\x80"', UTF8), (b'"\xc0\xaf"', UTF8),
    (b'"\xf4\x90\x80\x80"', UTF8), (b'"\xff"', UTF8),
    ('"Straße 東京 😀"'.encode(), OK), ("{}".encode("utf-16"), UTF8),
] + LONG


def verdict(data):
    try:
        Record("pk", "1", data).json()
    except DecodeError as e:
        return e.kind
    return OK


class JsonRule(unittest.TestCase):
    def test_verdicts(self):
        for data, expected in CASES:
            with self.subTest(data=data[:60]):
                self.assertEqual(verdict(data), expected)

    def test_duplicate_keys_are_rejected_at_any_depth(self):
        for data in (b'{"a":1,"a":1}', b'{"a":{"b":1,"b":2}}', b'[{"k":1,"x":0,"k":2}]'):
            with self.subTest(data=data):
                with self.assertRaises(DecodeError) as cm:
                    Record("pk", "1", data).json()
                self.assertIn("duplicate key", str(cm.exception))
        # the same key in different objects is fine
        self.assertEqual(Record("pk", "1", b'[{"a":1},{"a":2}]').json(), [{"a": 1}, {"a": 2}])

    def test_numbers_are_typed_as_serde_json_value_holds_them(self):
        def value(text):
            return Record("pk", "1", text).json()

        for text, expected in (("0", 0), ("7", 7), ("-1", -1),
                               ("18446744073709551615", 2**64 - 1),
                               ("-9223372036854775808", -(2**63))):
            v = value(text)
            self.assertIs(type(v), int, text)
            self.assertEqual(v, expected)
        for text in ("-0", "1.0", "1e2", "18446744073709551616", "-9223372036854775809",
                     "1" + "0" * 308, "0.5"):
            self.assertIs(type(value(text)), float, text)
        self.assertEqual(math.copysign(1, value("-0")), -1.0)
        self.assertEqual(value("18446744073709551616"), 2.0**64)
        self.assertIs(value("true"), True)
        self.assertIsNone(value("null"))

    def test_values(self):
        r = Record("pk", "1", '{"id": 7, "tags": ["a", "\\u00e9"], "n": null, "x": 1.5}')
        self.assertEqual(r.json(), {"id": 7, "tags": ["a", "é"], "n": None, "x": 1.5})
        self.assertEqual(Record("pk", "1", '"\\ud83d\\ude00"').json(), "😀")

    def test_errors_say_what_is_wrong(self):
        with self.assertRaises(DecodeError) as cm:
            Record("pk", "1", b'{"a" \xff}').json()
        self.assertEqual(cm.exception.kind, "utf8")
        self.assertEqual(cm.exception.offset, 5)
        self.assertEqual(str(cm.exception), "record data is not UTF-8 text (invalid byte at offset 5)")
        self.assertIsInstance(cm.exception, ValueError)

        for data, words in ((b"{not json", "not valid JSON"), (b"NaN", "NaN is not JSON"),
                            (b"[1e400]", "number out of range"),
                            (b"[" * 200 + b"]" * 200, "nested more than 128"),
                            (b'["\\udc00"]', "surrogate"), (b"{} x", "Extra data")):
            with self.subTest(data=data[:20]):
                with self.assertRaises(DecodeError) as cm:
                    Record("pk", "1", data).json()
                self.assertEqual(cm.exception.kind, "json")
                self.assertIn(words, str(cm.exception))
                self.assertTrue(str(cm.exception).startswith("record data is not valid JSON: "))

    def test_deep_nesting_never_overflows_the_stack(self):
        for n in (1000, 100_000):
            with self.assertRaises(DecodeError):
                Record("pk", "1", b"[" * n + b"]" * n).json()


def _shipment(data):
    """The verdict of the shipping example's shape on `data`, as the Rust SDK's tests compute
    it for `struct Shipment { id: u64, address: String, carrier: String }`: "ok", "rule" (the
    JSON rule refused the document) or "shape" (a field is missing or of another type)."""
    try:
        v = Record("pk", "1", data).json()
    except DecodeError:
        return "rule"
    id_ = v.get("id")
    if type(id_) is not int or not 0 <= id_ < 2**64:
        return "shape"
    if type(v.get("address")) is not str or type(v.get("carrier")) is not str:
        return "shape"
    return "ok"


def _with_id(id_):
    return '{"id":%s,"address":"1 Main St","carrier":"dhl"}' % id_


def _with_unread(x):
    return '{"id":7,"address":"1 Main St","carrier":"dhl","x":%s}' % x


class RuleCategories(unittest.TestCase):
    """One test per category of the JSON rule (guest-sdk/JSON.md), the same cases as the Rust
    SDK's `rule_*` tests (guest-sdk/src/record.rs) and the JavaScript SDK's json.test.js."""

    def test_integer_fields_take_integer_literals_only(self):
        self.assertEqual(_shipment(_with_id("7")), "ok")
        for f in ("1.0", "1e3", "1E0", "10e-1", "-0", "0.0", "7.5"):
            self.assertEqual(_shipment(_with_id(f)), "shape", f)
            self.assertIs(type(Record("pk", "1", f).json()), float, f)
        self.assertEqual(_shipment(_with_unread("1.0")), "ok")

    def test_integers_past_2_53_and_past_64_bits(self):
        for id_ in ("9007199254740993", "18446744073709551615"):
            self.assertEqual(_shipment(_with_id(id_)), "ok", id_)
        self.assertEqual(Record("pk", "1", _with_id("18446744073709551615")).json()["id"], 2**64 - 1)
        self.assertEqual(_shipment(_with_id("18446744073709551616")), "shape")
        self.assertEqual(_shipment(_with_id("1" * 30)), "shape")
        for x in ("18446744073709551616", "-9223372036854775809"):
            self.assertEqual(_shipment(_with_unread(x)), "ok", x)
        self.assertEqual(Record("pk", "1", "-9223372036854775808").json(), -(2**63))

    def test_lone_surrogates_anywhere(self):
        for x in ('"\\ud800"', '"\\udc00"', '"\\ud800\\u0041"', '{"\\ud800":1}'):
            self.assertEqual(_shipment(_with_unread(x)), "rule", x)
        self.assertEqual(_shipment('{"id":7,"address":"\\ud83d St","carrier":"dhl"}'), "rule")
        self.assertEqual(_shipment('{"id":7,"address":"\\ud83d\\ude9a St","carrier":"dhl"}'), "ok")

    def test_duplicate_keys_at_the_top_and_nested(self):
        self.assertEqual(_shipment('{"id":7,"address":"1 Main St","carrier":"dhl","x":1,"x":2}'), "rule")
        self.assertEqual(_shipment('{"id":7,"address":"1 Main St","carrier":"dhl","id":8}'), "rule")
        for x in ('{"a":1,"a":2}', '{"a":1,"\\u0061":2}', '[{"b":{"c":1,"c":1}}]'):
            self.assertEqual(_shipment(_with_unread(x)), "rule", x)
        self.assertEqual(_shipment(_with_unread('[{"a":1},{"a":2}]')), "ok")

    def test_numbers_finite_as_doubles(self):
        for x in ("1e400", "-1e400", "1.7976931348623159e308", "1" * 400):
            self.assertEqual(_shipment(_with_unread(x)), "rule", x[:30])
        for x in ("1.7976931348623158e308", "1e-400", "1" * 79):
            self.assertEqual(_shipment(_with_unread(x)), "ok", x[:30])
        self.assertEqual(Record("pk", "1", "1.7976931348623158e308").json(), 1.7976931348623157e308)

    def test_long_digit_runs(self):
        for x in ("1" * 79, "0." + "1" * 500, "1" + "0" * 308):
            self.assertEqual(_shipment(_with_unread(x)), "ok", x[:30])
        self.assertEqual(_shipment(_with_unread("9" * 309)), "rule")

    def test_nesting_depth(self):
        def nested(n):
            return "[" * n + "]" * n

        # the shipment object is level 1
        self.assertEqual(_shipment(_with_unread(nested(127))), "ok")
        self.assertEqual(_shipment(_with_unread(nested(128))), "rule")
        self.assertIsInstance(Record("pk", "1", nested(128)).json(), list)
        with self.assertRaises(DecodeError) as cm:
            Record("pk", "1", nested(129)).json()
        self.assertIn("nested more than 128", str(cm.exception))


def _outcome(fn, text):
    try:
        v = fn(text)
    except _json.JsonError as e:
        return ("error", str(e))
    return ("ok", repr(v), type(v))


class FastPath(unittest.TestCase):
    """`loads` answers without the per-value hooks when it can prove the answer; these check
    that it answers exactly what the full rule (`_strict`) answers, error messages included."""

    SEEDS = [
        '{"id":1,"address":"1 Main Street","carrier":"dhl","note":"fragile, keep dry"}',
        '{"a":{"b":[1,2,{"c":null}]},"d":-5,"e":0.25,"f":"x:y","g":true}',
        '[1,-2,3.5,"s",[],{}]',
        '{"t":"12:30","u":"http://x","n":18446744073709551615}',
    ]
    PIECES = [
        '"a"', '"a":', ' :', '\t:', ':', ',', '{', '}', '[', ']', '"', '\\', '\\u00e9',
        '\\ud800', '-0', '-0.5', '0', '18446744073709551616', '-9223372036854775809',
        '9223372036854775807', '1e400', '1e307', '-1.7e308', '1.5', 'NaN', 'Infinity', ' ',
        '\n', 'true', 'null', '"k":1', '"k" :2', '"k":{"k":1}', '9' * 400,
    ]

    def test_fast_path_agrees_with_the_full_rule(self):
        import random

        rng = random.Random(15)
        texts = list(self.SEEDS)
        for data, _ in CASES:
            try:
                texts.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                pass
        for _ in range(20000):
            t = rng.choice(self.SEEDS)
            for _ in range(rng.randint(1, 3)):
                i = rng.randint(0, len(t))
                if rng.random() < 0.3 and i < len(t):
                    t = t[:i] + t[i + 1:]
                else:
                    t = t[:i] + rng.choice(self.PIECES) + t[i:]
            texts.append(t)
        texts += ['{"a":1,"a":2}', '{"a":1,"a" :2}', '{"a" :1,"a":2}', '{"x":{"a":1,"a":2}}',
                  '[{"a":1,"a":2}]', '{"a":"\\":","a":1}', '{"a\\"":1,"a\\"":2}']
        for t in texts:
            with self.subTest(text=t[:80]):
                self.assertEqual(_outcome(_json.loads, t), _outcome(_json._strict, t))

    def test_the_common_record_takes_the_fast_path(self):
        # a flat record decodes without the hooks: the strict decoder is never asked
        calls = []
        strict = _json._strict
        _json._strict = lambda t: calls.append(t) or strict(t)
        try:
            self.assertEqual(_json.loads(self.SEEDS[0])["carrier"], "dhl")
            self.assertEqual(_json.loads(self.SEEDS[1])["d"], -5)
            self.assertEqual(_json.loads(self.SEEDS[2])[2], 3.5)
            self.assertEqual(_json.loads(self.SEEDS[3])["n"], 2**64 - 1)
            self.assertEqual(_json.loads('{"a":{"b":1},"c":[{"d":-0}]}')["c"][0]["d"], -0.0)
            self.assertEqual(calls, [])
            with self.assertRaises(_json.JsonError):
                _json.loads('{"a":1,"a":2}')
            self.assertEqual(calls, ['{"a":1,"a":2}'])
        finally:
            _json._strict = strict


if __name__ == "__main__":
    unittest.main()
