SELECT id, name, status FROM einmal.campaigns WHERE id = $1
