// The page's one inline script and its styles: the interactive timeline
// (one band per large allocation, hover, pin, brush zoom, steps or time on
// the x axis), the live-memory flame graph at a chosen moment and the growth
// chart per site. It reads its data from <script id="ts-data"> (bands_json()),
// needs nothing from the network and touches only elements with ts- ids.
#pragma once

namespace torchseal {

extern const char kHtmlScript[];
extern const char kHtmlScriptStyle[];

}  // namespace torchseal
