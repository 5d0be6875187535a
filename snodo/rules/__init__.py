"""The pure decisions governance rests on: the path guard (INV2), which results may be authorised
(INV3), the four outcomes, task identity, the plugin settings rule."""
