// pickle_probe OUT.pickle: writes values that exercise every encoding branch
// of PickleWriter (integer widths and LONG1 sign boundaries, string lengths,
// UTF-8 repair, memo GET/PUT both widths, APPENDS batching). The test
// (run_export_tests.py pickle_encoding) unpickles it with Python and compares
// against the same values computed in Python.
#include <cstdint>
#include <cstdio>
#include <string>

#include "report/render/pickle_writer.h"

using torchseal::ListBatcher;
using torchseal::PickleWriter;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pickle_probe OUT.pickle\n");
    return 2;
  }
  std::FILE *f = std::fopen(argv[1], "wb");
  if (!f) {
    std::perror(argv[1]);
    return 1;
  }
  {
    PickleWriter w(f);
    w.proto(4);
    w.empty_dict();

    w.string("ints");
    w.empty_list();
    ListBatcher ints(w);
    const int64_t signed_values[] = {0,           1,           255,         256,
                                     65535,       65536,       2147483647,  2147483648LL,
                                     -1,          -128,        -129,        -32768,
                                     -2147483648LL, -2147483649LL, (1LL << 53) - 1,
                                     INT64_MAX,   INT64_MIN,   0x7f0000001000LL,
                                     -(1LL << 40), 1LL << 55};
    for (int64_t v : signed_values) {
      ints.item();
      w.integer(v);
    }
    const uint64_t unsigned_values[] = {UINT64_MAX, uint64_t{1} << 63, (uint64_t{1} << 63) + 12345};
    for (uint64_t v : unsigned_values) {
      ints.item();
      w.integer(v);
    }
    ints.finish();
    w.setitem();

    w.string("misc");
    w.empty_list();
    w.mark();
    w.none();
    w.boolean(true);
    w.boolean(false);
    w.floating(1.5);
    w.floating(-0.1);
    w.appends();
    w.setitem();

    w.string("strings");
    w.empty_list();
    w.mark();
    w.string("");
    w.string("plain");
    w.string(std::string(255, 'a'));
    w.string(std::string(256, 'b'));
    w.string(std::string(70000, 'c'));
    w.string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");   // valid multibyte
    w.string("bad\xff\xfe end");                              // invalid bytes
    w.string("trunc\xe2\x82");                                // truncated sequence
    w.string("overlong\xc0\xaf");                             // overlong '/'
    w.string("surrogate\xed\xa0\x80");                        // UTF-16 surrogate
    w.appends();
    w.setitem();

    // Memo: the same dict shared at a 1-byte and a 4-byte index.
    w.string("memo");
    w.empty_list();
    w.mark();
    w.empty_dict();
    w.put(7);
    w.mark();
    w.string("k");
    w.integer(int64_t{1});
    w.setitems();
    w.get(7);
    w.string("shared");
    w.put(100000);
    w.get(100000);
    w.appends();
    w.setitem();

    w.string("batched");
    w.empty_list();
    ListBatcher b(w);
    for (int i = 0; i < 2500; ++i) {
      b.item();
      w.integer(static_cast<int64_t>(i));
    }
    b.finish();
    w.setitem();

    w.string("empty");
    w.empty_list();
    ListBatcher e(w);
    e.finish();
    w.setitem();

    w.stop();
    if (!w.flush()) {
      std::perror("write");
      return 1;
    }
  }
  return std::fclose(f) == 0 ? 0 : 1;
}
