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

// ---- rules on the site's holders (report/analysis/holder_hints.h) ---------

namespace {

// Holders as the scan reports them: largest first.
std::vector<Holder> holders(std::vector<std::vector<std::string>> chains) {
  std::vector<Holder> out;
  uint64_t bytes = uint64_t(1) << 30;
  for (auto &c : chains) {
    out.push_back({std::move(c), bytes, 4});
    bytes /= 2;
  }
  return out;
}

std::vector<PythonFrame> with_torch(std::vector<PythonFrame> user) {
  std::vector<PythonFrame> f = torch_frames();
  f.insert(f.end(), user.begin(), user.end());
  return f;
}

}  // namespace

TEST_CASE("holder hint: a growing container, global, local or attribute", "[hints]") {
  SourceDir d;
  // `x` is no tensor-ish name: the source rules alone see nothing here.
  std::string leaky = d.write("leaky.py",
                              "import torch\n"                                // 1
                              "kept = []\n"                                   // 2
                              "def step():\n"                                 // 3
                              "    x = torch.randn(256, 1024, device='cuda')\n"  // 4
                              "    kept.append(x)\n"                          // 5
                              "for i in range(12):\n"                         // 6
                              "    step()\n");                                // 7
  auto frames = with_torch({{"step", leaky, 4}, {"<module>", leaky, 7}});
  CHECK_FALSE(find_hint(frames));
  auto kept = holders({{"global 'kept' (list) in leaky.py", "[0..11]", "Tensor float32 (256, 1024)"}});
  std::optional<Hint> h = find_hint(frames, kept);
  REQUIRE(h);
  CHECK(h->kind == "growing-container");
  CHECK(h->file == leaky);
  CHECK(h->line == 5);
  CHECK(h->message.find("`kept.append(x)` (leaky.py:5)") != std::string::npos);
  CHECK(h->message.find("`kept` (list)") != std::string::npos);
  CHECK(h->message.find('\n') == std::string::npos);

  // An attribute container, stored through `self.` in a method of the site;
  // the root's file (main.py) is on no frame: the method's own code decides.
  std::string trainer = d.write("trainer.py",
                                "class Trainer:\n"                   // 1
                                "    def __init__(self, model):\n"   // 2
                                "        self.model = model\n"       // 3
                                "        self.history = []\n"        // 4
                                "    def step(self, x):\n"           // 5
                                "        y = self.model(x)\n"        // 6
                                "        self.history.append(y)\n"   // 7
                                "        return y\n");               // 8
  h = find_hint(with_torch({{"Trainer.step", trainer, 6}}),
                holders({{"global 'trainer' (Trainer) in main.py", ".history (list)", "[0..9]",
                          "Tensor float32 (256,)"}}));
  REQUIRE(h);
  CHECK(h->kind == "growing-container");
  CHECK(h->line == 7);

  // A dict local: the store is in another function of the root's file.
  std::string cache = d.write("cache.py",
                              "def remember(memo, key, y):\n"      // 1
                              "    memo[key] = y\n"                // 2
                              "def run(model, xs):\n"              // 3
                              "    memo = {}\n"                    // 4
                              "    for i, x in enumerate(xs):\n"   // 5
                              "        remember(memo, i, model(x))\n"  // 6
                              "    return memo\n");                // 7
  h = find_hint(with_torch({{"run", cache, 6}}),
                holders({{"run() local 'memo' (dict) at cache.py:6", "[3]", "Tensor float32 (8,)"}}));
  REQUIRE(h);
  CHECK(h->line == 2);
  CHECK(h->message.find("`memo[key] = y` (cache.py:2)") != std::string::npos);

  // No line adds to it (built elsewhere): no hint, and a module that keeps a
  // list of tensors made in __init__ is no growth either.
  CHECK_FALSE(find_hint(frames, holders({{"global 'other' (list) in leaky.py", "[0..3]",
                                          "Tensor float32 (8,)"}})));
  std::string fixed_buffers = d.write("buffers.py",
                                      "class Net:\n"
                                      "    def __init__(self):\n"
                                      "        self.bufs = []\n"
                                      "        for i in range(4):\n"
                                      "            self.bufs.append(make(i))\n"
                                      "    def forward(self, x):\n"
                                      "        return x * 2\n");
  CHECK_FALSE(find_hint(with_torch({{"Net.forward", fixed_buffers, 7}}),
                        holders({{"global 'net' (Net) in buffers.py", ".bufs (list)", "[0..3]",
                                  "Tensor float32 (8,)"}})));
}

TEST_CASE("holder hint: a loss summed with its graph", "[hints]") {
  SourceDir d;
  const char *train_src =
      "def train(model, opt, loader):\n"            // 1
      "    running = 0\n"                           // 2
      "    for x, t in loader:\n"                   // 3
      "        err = ((model(x) - t) ** 2).mean()\n"  // 4
      "        opt.zero_grad()\n"                   // 5
      "        err.backward(retain_graph=True)\n"   // 6
      "        opt.step()\n"                        // 7
      "        running += err\n"                    // 8
      "    return running\n";                       // 9
  std::string t = d.write("t.py", train_src);
  auto frames = with_torch({{"train", t, 4}});
  CHECK_FALSE(find_hint(frames));  // `running`, `err`: no name says "loss"
  auto graph = holders({{"train() local 'running' (Tensor) at t.py:4", ".grad_fn (AddBackward0)",
                         ".next_functions[1] (MeanBackward0)", "... 3 more", "._saved_self",
                         "Tensor float32 (256, 1024)"}});
  std::optional<Hint> h = find_hint(frames, graph);
  REQUIRE(h);
  CHECK(h->kind == "loss-accumulation");
  CHECK(h->line == 8);
  CHECK(h->message.find("`running += err` (t.py:8)") != std::string::npos);
  CHECK(h->message.find("no_grad") == std::string::npos);  // training: backward runs

  // In evaluation (no backward), spelled out; the hint adds no_grad.
  std::string v = d.write("v.py",
                          "def check(model, loader):\n"          // 1
                          "    total = 0\n"                      // 2
                          "    for x, t in loader:\n"            // 3
                          "        err = (model(x) - t).abs().mean()\n"  // 4
                          "        total = total + err\n"        // 5
                          "    return total\n");                 // 6
  h = find_hint(with_torch({{"check", v, 4}}),
                holders({{"check() local 'total' (Tensor) at v.py:4", ".grad_fn (AddBackward0)",
                          ".next_functions[0] (AddBackward0)", "._saved_other",
                          "Tensor float32 (256, 1024)"}}));
  REQUIRE(h);
  CHECK(h->line == 5);
  CHECK(h->message.find("torch.no_grad()") != std::string::npos);

  // Without a graph, the same tensor is only a tensor; and a detached sum
  // elsewhere is not the line that keeps it.
  CHECK_FALSE(find_hint(frames, holders({{"train() local 'running' (Tensor) at t.py:4",
                                          "Tensor float32 ()"}})));
  std::string detached = d.write("t2.py", std::string(train_src).replace(
                                              std::string(train_src).find("running += err"),
                                              14, "running += err.item()"));
  CHECK_FALSE(find_hint(with_torch({{"train", detached, 4}}),
                        holders({{"train() local 'running' (Tensor) at t2.py:4",
                                  ".grad_fn (AddBackward0)", "Tensor float32 (256, 1024)"}})));
}

TEST_CASE("holder hint: outputs kept with their graphs in evaluation", "[hints]") {
  SourceDir d;
  std::string e = d.write("e.py",
                          "def collect(model, loader):\n"   // 1
                          "    outs = []\n"                 // 2
                          "    for x in loader:\n"          // 3
                          "        y = model(x)\n"          // 4
                          "        outs.append(y)\n"        // 5
                          "    return outs\n");             // 6
  auto chain = [](const std::string &root) {
    return holders({{root, "[0..7]", ".grad_fn (SumBackward1)", ".next_functions[0] (MulBackward0)",
                     "._saved_self", "Tensor float32 (256, 1024)"}});
  };
  std::optional<Hint> h =
      find_hint(with_torch({{"collect", e, 4}}), chain("collect() local 'outs' (list) at e.py:4"));
  REQUIRE(h);
  CHECK(h->kind == "eval-graph-kept");
  CHECK(h->line == 5);
  CHECK(h->message.find("`outs.append(y)` (e.py:5)") != std::string::npos);
  CHECK(h->message.find("torch.no_grad()") != std::string::npos);
  CHECK(h->message.find("in `collect`") != std::string::npos);

  // The same container in a training loop (backward runs): kept graphs, but
  // no_grad is not the fix.
  std::string t = d.write("t.py",
                          "def train(model, opt, loader):\n"  // 1
                          "    outs = []\n"                   // 2
                          "    for x in loader:\n"            // 3
                          "        y = model(x)\n"            // 4
                          "        y.sum().backward()\n"      // 5
                          "        outs.append(y)\n"          // 6
                          "        opt.step()\n");            // 7
  h = find_hint(with_torch({{"train", t, 4}}), chain("train() local 'outs' (list) at t.py:4"));
  REQUIRE(h);
  CHECK(h->kind == "growing-container");
  CHECK(h->line == 6);
  CHECK(h->message.find("autograd graphs") != std::string::npos);
  CHECK(h->message.find("no_grad") == std::string::npos);
}

TEST_CASE("holder hint: modules created every step", "[hints]") {
  SourceDir d;
  std::string net = d.write("net.py",
                            "import torch\n"                                     // 1
                            "class Net(torch.nn.Module):\n"                      // 2
                            "    def __init__(self):\n"                          // 3
                            "        super().__init__()\n"                       // 4
                            "        self.w = torch.nn.Parameter(torch.zeros(1024))\n"  // 5
                            "        self.layers = torch.nn.ModuleList()\n"      // 6
                            "        for i in range(8):\n"                       // 7
                            "            self.layers.append(torch.nn.Linear(8, 8))\n"  // 8
                            "        self.extra = []\n"                          // 9
                            "    def forward(self, x):\n"                        // 10
                            "        self.extra.append(torch.nn.Linear(8, 8).cuda())\n"  // 11
                            "        return x * self.w + self.extra[-1](x)\n");  // 12
  std::string train = d.write("train.py",
                              "import torch\n"                                   // 1
                              "from net import Net\n"                            // 2
                              "model = Net().cuda()\n"                           // 3
                              "opt = torch.optim.Adam(model.parameters())\n"     // 4
                              "def train(loader):\n"                             // 5
                              "    for x in loader:\n"                           // 6
                              "        y = model(x)\n"                           // 7
                              "        y.sum().backward()\n"                     // 8
                              "        opt.step()\n");                           // 9
  auto frames = with_torch({{"Net.forward", net, 11}, {"train", train, 7}});
  for (const char *kind : {"list", "ModuleList"}) {
    INFO(kind);
    std::vector<std::string> chain{"global 'model' (Net) in train.py",
                                   std::string(".extra (") + kind + ")"};
    if (std::string(kind) == "list") {
      chain.insert(chain.end(), {"[0..11]", ".weight (Parameter)"});
    } else {
      chain.insert(chain.end(), {".0..11 (Linear)", ".weight (Parameter)"});
    }
    chain.push_back("Parameter float32 (8, 8)");
    std::optional<Hint> h = find_hint(frames, holders({chain}));
    REQUIRE(h);
    CHECK(h->kind == "module-per-step");
    CHECK(h->file == net);
    CHECK(h->line == 11);
    CHECK(h->message.find("`self.extra.append(torch.nn.Linear(8, 8).cuda())` (net.py:11)") !=
          std::string::npos);
  }

  // A correct program: the model's own parameters, a ModuleList built in
  // __init__, the optimizer's state. None is a hint; a later holder that is
  // one still wins.
  std::vector<std::vector<std::string>> correct{
      {"global 'model' (Net) in train.py", ".w (Parameter)", "Parameter float32 (1024,)"},
      {"global 'model' (Net) in train.py", ".layers (ModuleList)", ".0..7 (Linear)",
       ".weight (Parameter)", "Parameter float32 (8, 8)"},
      {"global 'opt' (Adam) in train.py", ".state (defaultdict)", "[<Parameter float32 (1024,)>]",
       "['exp_avg']", "Tensor float32 (1024,)"},
      {"global 'opt' (Adam) in train.py", ".param_groups (list)", "[0]", "['params']", "[0..1]",
       "Parameter float32 (1024,)"},
      {"global 'model' (Net) in train.py", ".w (Parameter)", ".grad", "Tensor float32 (1024,)"},
  };
  // (The forward frame's own line appends: the source rules would guess
  // from it; without it only the holders speak.)
  CHECK_FALSE(find_hint(with_torch({{"train", train, 7}}), holders(correct)));
  correct.push_back({"global 'model' (Net) in train.py", ".extra (list)", "[0..11]",
                     ".bias (Parameter)", "Parameter float32 (8,)"});
  std::optional<Hint> h = find_hint(frames, holders(correct));
  REQUIRE(h);
  CHECK(h->kind == "module-per-step");
  CHECK(h->line == 11);
}

TEST_CASE("holder hint: a traceback pinned by an OOM retry", "[hints]") {
  SourceDir d;
  std::string r = d.write("r.py",
                          "import torch\n"                                // 1
                          "failed = []\n"                                 // 2
                          "def attempt(model, x):\n"                      // 3
                          "    h = model(x)\n"                            // 4
                          "    return h * 2\n"                            // 5
                          "def train(model, batches):\n"                  // 6
                          "    for x in batches:\n"                       // 7
                          "        try:\n"                                // 8
                          "            attempt(model, x)\n"               // 9
                          "        except torch.OutOfMemoryError as e:\n"  // 10
                          "            failed.append(e)\n"                // 11
                          "            attempt(model, x[:1])\n");         // 12
  const std::vector<std::string> pinned{".__traceback__", ".tb_next", "frame",
                                        "attempt() local 'h' (Tensor) at r.py:4 (in a traceback)",
                                        "Tensor float32 (4096, 1024)"};
  auto chain = [&](std::vector<std::string> head) {
    head.insert(head.end(), pinned.begin(), pinned.end());
    return holders({head});
  };
  // The retry, inside the except block: its clause.
  std::optional<Hint> h = find_hint(with_torch({{"attempt", r, 4}, {"train", r, 12}}),
                                    chain({"exception OutOfMemoryError"}));
  REQUIRE(h);
  CHECK(h->kind == "exception-frame");
  CHECK(h->line == 10);
  CHECK(h->message.find("`except torch.OutOfMemoryError as e:` (r.py:10)") != std::string::npos);

  // Later, outside the block: the line that stores the exception, or the
  // clause binding the local that still holds it.
  auto later = with_torch({{"attempt", r, 4}, {"train", r, 9}});
  CHECK_FALSE(find_hint(later));
  h = find_hint(later, chain({"global 'failed' (list) in r.py", "[0..3]"}));
  REQUIRE(h);
  CHECK(h->kind == "exception-frame");
  CHECK(h->line == 11);
  h = find_hint(later, chain({"train() local 'e' (OutOfMemoryError) at r.py:9"}));
  REQUIRE(h);
  CHECK(h->line == 10);
}

TEST_CASE("holder hint: a loop local alive past its loop at an OOM", "[hints]") {
  SourceDir d;
  std::string l = d.write("l.py",
                          "import torch\n"                                        // 1
                          "def run(model, xs):\n"                                 // 2
                          "    for x in xs:\n"                                    // 3
                          "        inter = model(x)\n"                            // 4
                          "        inter = inter * 2\n"                           // 5
                          "    result = torch.empty(1 << 30, device='cuda')\n"    // 6
                          "    return result\n");                                 // 7
  auto frames = with_torch({{"run", l, 6}});
  std::optional<Hint> h = find_hint(
      frames, holders({{"run() local 'inter' (Tensor) at l.py:6", "Tensor float32 (4096, 4096)"}}));
  REQUIRE(h);
  CHECK(h->kind == "loop-local");
  CHECK(h->line == 5);  // the last assignment before the OOM's line
  CHECK(h->message.find("`inter = inter * 2` (l.py:5)") != std::string::npos);
  CHECK(h->message.find("del inter") != std::string::npos);
  // The loop variable itself: its `for`.
  h = find_hint(frames, holders({{"run() local 'x' (Tensor) at l.py:6", "Tensor float32 (8,)"}}));
  REQUIRE(h);
  CHECK(h->line == 3);

  // Still inside the loop, assigned outside any loop, or a function that is
  // not on the site's stack: no hint.
  CHECK_FALSE(find_hint(with_torch({{"run", l, 5}}),
                        holders({{"run() local 'inter' (Tensor) at l.py:5", "Tensor float32 (8,)"}})));
  CHECK_FALSE(find_hint(with_torch({{"run", l, 7}}),
                        holders({{"run() local 'result' (Tensor) at l.py:7", "Tensor float32 (8,)"}})));
  CHECK_FALSE(find_hint(frames, holders({{"other() local 'inter' (Tensor) at l.py:6",
                                          "Tensor float32 (8,)"}})));

  // An uncaught OOM: the scan ran once the frame was gone and only the
  // traceback keeps it. That frame's line decides, not the site's.
  auto pinned = [](const char *local) {
    return holders({{"exception OutOfMemoryError", ".__traceback__", "frame", local,
                     "Tensor float32 (4096, 4096)"}});
  };
  h = find_hint(frames, pinned("run() local 'inter' (Tensor) at l.py:6 (in a traceback)"));
  REQUIRE(h);
  CHECK(h->kind == "loop-local");
  CHECK(h->line == 5);
  CHECK_FALSE(find_hint(frames, pinned("run() local 'inter' (Tensor) at l.py:5 (in a traceback)")));
}

TEST_CASE("holder hint: odd chains and missing files give no hint", "[hints]") {
  SourceDir d;
  std::string leaky =
      d.write("leaky.py", "kept = []\ndef step(x):\n    y = x * 2\n    kept.append(y)\n");
  auto frames = with_torch({{"step", leaky, 3}});
  std::vector<std::vector<std::string>> odd{
      {},
      {"global 'kept' (list) in leaky.py"},
      {"", "", ""},
      {"global 'kept' (list) in", "[", "Tensor"},
      {"x() local 'kept' (list) at leaky.py:99999999999999999999", "[0]", "Tensor float32 (1,)"},
      {"global '" + std::string(5000, 'k') + "' (list) in leaky.py", "[0]", "Tensor float32 (1,)"},
      {"class attribute .x (list)", "[0]", "Tensor float32 (1,)"},
      {"exception", ".__traceback__", "Tensor float32 (1,)"},
  };
  for (auto &c : odd) {
    INFO(c.size());
    CHECK_NOTHROW(find_hint(frames, holders({c})));
    CHECK_FALSE(find_hint(frames, holders({c})));
  }
  // The source is gone: no hint.
  auto kept = holders({{"global 'kept' (list) in leaky.py", "[0..2]", "Tensor float32 (1,)"}});
  REQUIRE(find_hint(frames, kept));
  std::filesystem::remove(leaky);
  CHECK_FALSE(find_hint(frames, kept));
}

TEST_CASE("holder hint: chains as real torch reports them", "[hints]") {
  SourceDir d;
  // examples/python/torch/oom_retry.py: one list takes the exceptions and
  // the retry's tensors; the growth site allocates x, so `append(x)` is it.
  std::string r = d.write("oom_retry.py",
                          "import torch\n"                                 // 1
                          "failed_attempts = []\n"                         // 2
                          "def train_leaky(model, opt, huge):\n"           // 3
                          "    for i in range(24):\n"                      // 4
                          "        try:\n"                                 // 5
                          "            forward_backward(model, opt, huge)\n"  // 6
                          "        except torch.OutOfMemoryError as e:\n"  // 7
                          "            failed_attempts.append(e)\n"        // 8
                          "            x = torch.randn(256, 1024, device='cuda')\n"  // 9
                          "            failed_attempts.append(x)\n"        // 10
                          "            forward_backward(model, opt, 1)\n"  // 11
                          "        step()\n");                             // 12
  auto growth = with_torch({{"train_leaky", r, 9}, {"<module>", r, 40}});
  std::optional<Hint> h = find_hint(
      growth, holders({{"global 'failed_attempts' (list) in oom_retry.py", "[1..23]",
                        "Tensor float32 (256, 1024)"}}));
  REQUIRE(h);
  CHECK(h->kind == "growing-container");
  CHECK(h->line == 10);
  // The OOM of a later first attempt, out of the block: the exception's store.
  h = find_hint(with_torch({{"forward_backward", r, 30}, {"train_leaky", r, 6}}),
                holders({{"global 'failed_attempts' (list) in oom_retry.py", "[0]",
                          ".__traceback__", ".tb_next", "frame",
                          "forward_backward() local 'x' (Tensor) at oom_retry.py:21 (in a traceback)",
                          "Tensor float32 (39168, 1024)"},
                         {"train_leaky() local 'x' (Tensor) at oom_retry.py:6",
                          "Tensor float32 (256, 1024)"}}));
  REQUIRE(h);
  CHECK(h->kind == "exception-frame");
  CHECK(h->line == 8);

  // Outputs kept through a helper in another function (the append is not in
  // the site's functions), as a dump of a real evaluation loop showed them.
  std::string p = d.write("probe.py",
                          "def keep(predictions, y):\n"          // 1
                          "    predictions.append(y)\n"          // 2
                          "def evaluate(model):\n"               // 3
                          "    outs = []\n"                      // 4
                          "    for _ in range(4):\n"             // 5
                          "        x, t = batch()\n"             // 6
                          "        y = model(x)\n"               // 7
                          "        keep(outs, y)\n"              // 8
                          "    return outs\n");                  // 9
  h = find_hint(with_torch({{"evaluate", p, 7}}),
                holders({{"evaluate() local 'outs' (list) at probe.py:7", "[0..2]",
                          ".grad_fn (SumBackward1)", ".next_functions[0] (AddBackward0)",
                          ".next_functions[0] (MulBackward0)", "._saved_self",
                          "Tensor float32 (256, 1024)"},
                         {"evaluate() local 'outs' (list) at probe.py:7", "[0..2]",
                          "Tensor float32 (256,)"}}));
  REQUIRE(h);
  CHECK(h->kind == "eval-graph-kept");
  CHECK(h->line == 2);
  CHECK(h->message.find("in `keep`") != std::string::npos);
}

TEST_CASE("holder hint: class attributes, module globals, attribute tensors", "[hints]") {
  SourceDir d;
  // A class attribute of b.py, and a global of the imported module pkg.store.
  std::string b = d.write("b.py",
                          "class Cache:\n"                     // 1
                          "    store = {}\n"                   // 2
                          "    def put(self, key, out):\n"     // 3
                          "        Cache.store[key] = out\n"   // 4
                          "def run(model, xs, c):\n"           // 5
                          "    for k, x in enumerate(xs):\n"   // 6
                          "        c.put(k, model(x))\n");     // 7
  std::string store = d.write("pkg/store.py",
                              "kept = []\n"                    // 1
                              "def keep(t):\n"                 // 2
                              "    kept.extend([t, t])\n");    // 3
  auto frames = with_torch({{"run", b, 7}, {"keep", store, 3}});
  std::optional<Hint> h = find_hint(
      frames, holders({{"class attribute b.py.Cache.store (dict)", "['a']", "Tensor float32 (8,)"}}));
  REQUIRE(h);
  CHECK(h->kind == "growing-container");
  CHECK(h->file == b);
  CHECK(h->line == 4);
  h = find_hint(frames,
                holders({{"global 'kept' (list) in pkg.store", "[0..9]", "Tensor float32 (8,)"}}));
  REQUIRE(h);
  CHECK(h->file == store);
  CHECK(h->line == 3);
  // A module that is on no frame, with no store in the site's code: the
  // holders say nothing, and the source rules guess from the frame's line.
  h = find_hint(frames,
                holders({{"global 'kept2' (list) in other.mod", "[0..9]", "Tensor float32 (8,)"}}));
  REQUIRE(h);
  CHECK(h->kind == "tensor-append");

  // A tensor attribute summed with its graph: `self.total += ...`.
  std::string s = d.write("stats.py",
                          "class Stats:\n"                          // 1
                          "    def __init__(self):\n"               // 2
                          "        self.total = 0\n"                // 3
                          "    def add(self, err):\n"               // 4
                          "        self.total += err * 2\n"         // 5
                          "def train(model, xs, stats, opt):\n"     // 6
                          "    for x in xs:\n"                      // 7
                          "        err = model(x).mean()\n"         // 8
                          "        err.backward()\n"                // 9
                          "        stats.add(err)\n");              // 10
  h = find_hint(with_torch({{"train", s, 8}}),
                holders({{"global 'stats' (Stats) in stats.py", ".total (Tensor)",
                          ".grad_fn (AddBackward0)", "._saved_other", "Tensor float32 (8,)"}}));
  REQUIRE(h);
  CHECK(h->kind == "loss-accumulation");
  CHECK(h->line == 5);
}
