"""filecache."""
