"""The project holds no models; this module lets post_migrate reach ProjectConfig."""
