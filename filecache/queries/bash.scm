; bash
