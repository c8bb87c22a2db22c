#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "report/analysis/hints.h"

using namespace torchseal;
namespace fs = std::filesystem;

namespace {

// A private directory of Python sources for one test case.
struct SourceDir {
  fs::path root;
  SourceDir() {
    static int counter = 0;
    root = fs::temp_directory_path() /
           ("torchseal-hints-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~SourceDir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  std::string write(const std::string &rel, const std::string &text) {
    fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

// The innermost frames of a PyTorch allocation: library code first.
std::vector<PythonFrame> torch_frames() {
  return {{"Linear.forward", "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", 125},
          {"Module._call_impl", "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py",
           1562}};
}

// The hint's message, empty when no rule matched (these cases have no
// holders: the source rules alone).
std::string hint_for(const GrowthEntry &g) {
  std::optional<Hint> h = find_hint(g.python_frames);
  return h ? h->message : std::string();
}

GrowthEntry entry(std::vector<PythonFrame> frames) {
  GrowthEntry g;
  g.bytes_per_step = 1 << 20;
  g.python_frames = std::move(frames);
  return g;
}

const char *kModel =
    "import torch\n"
    "class Net(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        h = self.fc(x)\n"
    "        return torch.relu(h)\n";

std::string train_loop(const std::string &accumulate) {
  return "import torch\n"                                        // 1
         "\n"                                                    // 2
         "def train(model, loader, opt):\n"                      // 3
         "    total_loss = 0.0\n"                                // 4
         "    for x, y in loader:\n"                             // 5
         "        out = model(x)\n"                              // 6
         "        loss = torch.nn.functional.mse_loss(out, y)\n"  // 7
         "        opt.zero_grad()\n"                             // 8
         "        loss.backward()\n"                             // 9
         "        opt.step()\n"                                  // 10
         "        " + accumulate + "\n"                          // 11
         "    return total_loss\n";                              // 12
}

// model.py forward (user code, no evidence) <- train.py:6 <- a caller.
std::vector<PythonFrame> train_frames(const std::string &model, const std::string &train) {
  auto f = torch_frames();
  f.push_back({"Net.forward", model, 4});
  f.push_back({"Module._call_impl", "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py",
               1562});
  f.push_back({"train", train, 6});
  f.push_back({"<module>", train, 99});  // past the end of the file: no evidence, no crash
  return f;
}

}  // namespace

TEST_CASE("hint: a tensor loss accumulated across steps", "[hints]") {
  SourceDir d;
  std::string model = d.write("model.py", kModel);
  std::string h = hint_for(entry(train_frames(model, d.write("train.py", train_loop("total_loss += loss")))));
  CHECK(h.find("`total_loss += loss` (train.py:11)") != std::string::npos);
  CHECK(h.find("autograd graph") != std::string::npos);
  CHECK(h.find("loss.item()") != std::string::npos);
  CHECK(h.find('\n') == std::string::npos);
  // P.json's hint names the statement that keeps the memory, not the allocation.
  std::optional<Hint> full = find_hint(train_frames(model, d.root.string() + "/train.py"));
  REQUIRE(full);
  CHECK(full->kind == "loss-accumulation");
  CHECK(full->file == d.root.string() + "/train.py");
  CHECK(full->line == 11);

  // The same spelled out, with a per-batch weight, or via a loss function.
  for (const char *line : {"total_loss = total_loss + loss", "total_loss += loss * x.size(0)",
                           "total_loss += loss_fn(out, y)", "stats['loss'] += loss  # running"}) {
    INFO(line);
    CHECK(hint_for(entry(train_frames(model, d.write("t2.py", train_loop(line)))))
              .find("autograd graph") != std::string::npos);
  }
}

TEST_CASE("hint: no loss hint when the loss is detached or a number", "[hints]") {
  SourceDir d;
  std::string model = d.write("model.py", kModel);
  for (const char *line : {"total_loss += loss.item()", "total_loss += loss.detach()",
                           "total_loss += float(loss)", "total_loss += loss.detach().cpu() * 2",
                           "# total_loss += loss", "steps += 1"}) {
    INFO(line);
    CHECK(hint_for(entry(train_frames(model, d.write("t.py", train_loop(line))))).empty());
  }
  // A name that holds a number, though it says "loss".
  std::string src = train_loop("batch_loss = loss.item()\n        total_loss += batch_loss");
  CHECK(hint_for(entry(train_frames(model, d.write("t3.py", src)))).empty());
}

TEST_CASE("hint: tensors appended to a list", "[hints]") {
  SourceDir d;
  std::string model = d.write("model.py", kModel);
  std::string h =
      hint_for(entry(train_frames(model, d.write("a.py", train_loop("history.append(loss)")))));
  CHECK(h.find("`history.append(loss)` (a.py:11)") != std::string::npos);
  CHECK(h.find(".detach()") != std::string::npos);
  h = hint_for(entry(train_frames(model, d.write("b.py", train_loop("outputs.append(out)")))));
  CHECK(h.find("outputs.append(out)") != std::string::npos);

  for (const char *line : {"outputs.append(out.detach().cpu())", "history.append(loss.item())",
                           "names.append(name)", "history.append(float(loss))"}) {
    INFO(line);
    CHECK(hint_for(entry(train_frames(model, d.write("c.py", train_loop(line))))).empty());
  }

  // The allocating line itself appends: whatever it appends was just made.
  std::string src =
      "def collect(model, loader):\n"
      "    preds = []\n"
      "    for x in loader:\n"
      "        preds.append(model(x))\n"
      "    return preds\n";
  auto f = torch_frames();
  f.push_back({"collect", d.write("collect.py", src), 4});
  h = hint_for(entry(f));
  CHECK(h.find("`preds.append(model(x))` (collect.py:4)") != std::string::npos);
}

TEST_CASE("hint: allocation inside an except block (OOM retry)", "[hints]") {
  SourceDir d;
  std::string src =
      "import torch\n"                                        // 1
      "def step(model, batch):\n"                             // 2
      "    try:\n"                                            // 3
      "        return model(batch)\n"                         // 4
      "    except torch.cuda.OutOfMemoryError as e:\n"        // 5
      "        torch.cuda.empty_cache()\n"                    // 6
      "        half = batch[: len(batch) // 2]\n"             // 7
      "        return model(half)\n";                         // 8
  std::string path = d.write("retry.py", src);
  auto f = torch_frames();
  f.push_back({"step", path, 8});
  std::string h = hint_for(entry(f));
  CHECK(h.find("`except torch.cuda.OutOfMemoryError as e:` at retry.py:5") != std::string::npos);
  CHECK(h.find("traceback") != std::string::npos);
  std::optional<Hint> full = find_hint(f);
  REQUIRE(full);
  CHECK(full->kind == "exception-frame");
  CHECK(full->line == 5);  // the except clause
  // The first attempt, in the try body, is not in an except block.
  f.back().line = 4;
  CHECK(hint_for(entry(f)).empty());
}

TEST_CASE("hint: validation without torch.no_grad()", "[hints]") {
  SourceDir d;
  std::string model = d.write("model.py", kModel);
  auto frames_for = [&](const std::string &path, int line) {
    auto f = torch_frames();
    f.push_back({"Net.forward", model, 4});
    f.push_back({"validate", path, line});
    return f;
  };
  std::string plain =
      "def validate(model, loader):\n"               // 1
      "    model.eval()\n"                           // 2
      "    scores = []\n"                            // 3
      "    for x, y in loader:\n"                    // 4
      "        out = model(x)\n"                     // 5
      "        scores.append((out - y).abs().mean())\n"
      "    return scores\n";
  std::string h = hint_for(entry(frames_for(d.write("v.py", plain), 5)));
  CHECK(h.find("`out = model(x)` (v.py:5)") != std::string::npos);
  CHECK(h.find("`validate`") != std::string::npos);
  CHECK(h.find("torch.no_grad()") != std::string::npos);

  std::string with_block =
      "import torch\n"
      "def validate(model, loader):\n"
      "    with torch.no_grad():\n"
      "        for x, y in loader:\n"
      "            out = model(x)\n";
  CHECK(hint_for(entry(frames_for(d.write("v2.py", with_block), 5))).empty());

  std::string decorated =
      "import torch\n"
      "@torch.inference_mode()\n"
      "def validate(model, loader):\n"
      "    for x, y in loader:\n"
      "        out = model(x)\n";
  CHECK(hint_for(entry(frames_for(d.write("v3.py", decorated), 5))).empty());

  // Grad disabled by the caller.
  std::string caller =
      "import torch\n"
      "def main(model, loader):\n"
      "    with torch.no_grad():\n"
      "        validate(model, loader)\n";
  auto f = frames_for(d.write("v4.py", plain), 5);
  f.push_back({"main", d.write("main.py", caller), 4});
  CHECK(hint_for(entry(f)).empty());

  // The same line in a training function is not validation.
  auto t = torch_frames();
  t.push_back({"train_epoch", d.write("v5.py", plain), 5});
  CHECK(hint_for(entry(t)).empty());
}

TEST_CASE("hint: a training loop at module level", "[hints]") {
  SourceDir d;
  std::string src =
      "import torch\n"
      "model = torch.nn.Linear(4, 4).cuda()\n"
      "total = 0\n"
      "for step in range(100):\n"
      "    x = torch.randn(8, 4, device='cuda')\n"
      "    out = model(x)\n"
      "    loss = out.sum()\n"
      "    total = total + loss\n"
      "print(total)\n";
  auto f = torch_frames();
  f.push_back({"<module>", d.write("script.py", src), 6});
  CHECK(hint_for(entry(f)).find("`total = total + loss` (script.py:8)") != std::string::npos);
}

TEST_CASE("hint: library frames are not evidence", "[hints]") {
  SourceDir d;
  std::string lib = d.write("venv/lib/python3.12/site-packages/pkg/loop.py", train_loop("total_loss += loss"));
  std::vector<PythonFrame> f{{"train", lib, 6}};
  CHECK(hint_for(entry(f)).empty());
}

TEST_CASE("hint: unreadable or odd evidence never crashes and gives no hint", "[hints]") {
  SourceDir d;
  CHECK(hint_for(GrowthEntry{}).empty());
  CHECK(hint_for(entry({{"train", "/nonexistent/dir/train.py", 11}})).empty());
  CHECK(hint_for(entry({{"train", d.root.string(), 1}})).empty());  // a directory
  CHECK(hint_for(entry({{"train", "/dev/null", 1}})).empty());
  std::string small = d.write("small.py", "total_loss += loss\n");
  CHECK(hint_for(entry({{"train", small, 0}})).empty());
  CHECK(hint_for(entry({{"train", small, -3}})).empty());
  CHECK(hint_for(entry({{"train", small, 2}})).empty());
  // A huge line (generated code) and binary junk.
  std::string huge = "x = [" + std::string(200000, '1') + "]\n" + "total_loss += loss\n";
  std::string big = d.write("huge.py", "def f():\n    for i in r:\n        " + huge);
  CHECK_NOTHROW(hint_for(entry({{"f", big, 3}})));
  std::string junk(4096, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = char((i * 131) & 0xff);
  CHECK_NOTHROW(hint_for(entry({{"f", d.write("junk.py", junk), 5}})));
}

TEST_CASE("hint: text from the file cannot forge report lines", "[hints]") {
  SourceDir d;
  // Control characters in the file name end up in the hint's location.
  std::string path = d.write("we\nird\x1b.py", train_loop("total_loss += loss"));
  std::string model = d.write("model.py", kModel);
  std::string h = hint_for(entry(train_frames(model, path)));
  REQUIRE_FALSE(h.empty());
  for (char c : h) CHECK(static_cast<unsigned char>(c) >= 0x20);
}
