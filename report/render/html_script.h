// The page's inline scripts and their styles: the interactive timeline
// (one band per large allocation, hover, pin, brush zoom, steps or time on
// the x axis), the live-memory flame graph at a chosen moment and the growth
// chart per site. It reads its data from <script id="ts-data"> (bands_json()),
// needs nothing from the network and touches only elements with ts- ids.
#pragma once

namespace torchseal {

extern const char kHtmlScript[];
extern const char kHtmlScriptStyle[];
// The verdict tables' "show all" buttons: each puts in the rows waiting in
// the <template> it names. Needs nothing else on the page.
extern const char kHtmlRowsScript[];

}  // namespace torchseal
